func.func @f( {
